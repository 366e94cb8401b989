/* Point-to-point helpers on bytes with size_t lengths: MPI counts are int,
 * so messages over 1 GiB go in pieces. */
#include <limits.h>
#include "ccb.h"

#define CHUNK ((size_t)1 << 30)

int ccb_sendrecv(const void *sbuf, size_t sbytes, int dst,
                 void *rbuf, size_t rbytes, int src, int tag, MPI_Comm comm) {
    if (sbytes <= CHUNK && rbytes <= CHUNK)
        return MPI_Sendrecv(sbuf, (int)sbytes, MPI_BYTE, dst, tag,
                            rbuf, (int)rbytes, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE);
    size_t off = 0, n = sbytes > rbytes ? sbytes : rbytes;
    while (off < n) {
        size_t sl = off < sbytes ? (sbytes - off < CHUNK ? sbytes - off : CHUNK) : 0;
        size_t rl = off < rbytes ? (rbytes - off < CHUNK ? rbytes - off : CHUNK) : 0;
        CCB_CHECK(MPI_Sendrecv((const char *)sbuf + (sl ? off : 0), (int)sl, MPI_BYTE, dst, tag,
                               (char *)rbuf + (rl ? off : 0), (int)rl, MPI_BYTE, src, tag,
                               comm, MPI_STATUS_IGNORE));
        off += CHUNK;
    }
    return MPI_SUCCESS;
}

int ccb_send(const void *buf, size_t bytes, int dst, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = bytes - off < CHUNK ? bytes - off : CHUNK;
        CCB_CHECK(MPI_Send((const char *)buf + off, (int)l, MPI_BYTE, dst, tag, comm));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}

int ccb_recv(void *buf, size_t bytes, int src, int tag, MPI_Comm comm) {
    size_t off = 0;
    do {
        size_t l = bytes - off < CHUNK ? bytes - off : CHUNK;
        CCB_CHECK(MPI_Recv((char *)buf + off, (int)l, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE));
        off += l;
    } while (off < bytes);
    return MPI_SUCCESS;
}
