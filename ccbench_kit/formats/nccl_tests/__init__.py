"""nccl-tests: its printed logs and ``-J`` JSON, read and written."""
