"""One run's parameters, validated once, shipped to every rank as JSON."""
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from . import collectives
from .dataset.schema import PLACEMENTS
from .dataset.stats import check_stat
from .dtypes import get_dtype, get_op
from .errors import ConfigError


@dataclass
class RunConfig:
    collective: str
    sizes: list
    nranks: int = 2
    algorithms: list = field(default_factory=lambda: ["mpi"])
    dtype: str = "fp32"
    op: str = "sum"
    root: int = 0
    placements: list = field(default_factory=lambda: list(PLACEMENTS))
    warmup: int = 5
    iters: int = 20
    agg_iters: int = 1
    blocking: bool = False
    check: str = ""          # "", "random" or "all_ones"
    seed: int = 0
    stats: list = field(default_factory=lambda: ["avg"])
    backend: str = "mpi"
    out: str = ""
    unique_buff: bool = False
    command: str = ""
    env: dict = field(default_factory=dict)
    skipped_sizes: list = field(default_factory=list)  # too small for this rank count
    # Inputs parsed (and validated) from JSON files or specs, owned by
    # ccbench_kit/inputs/; the harness and collectives only read them.
    # groups: lists of world ranks, all the same size ([] = one group of all);
    # a collective runs on its group, where ranks, roots and the alltoallv /
    # permute vectors below count within the group.
    groups: list = field(default_factory=list)      # replica groups: lists of world ranks
    alltoallv: list = field(default_factory=list)   # per WORLD rank: {send_counts, send_displs,
                                                    #  recv_counts, recv_displs} in elements,
                                                    #  each list one value per group rank
    pairs: list = field(default_factory=list)       # permute: [src, dst] pairs of group ranks,
                                                    #  the same in every group
    coalesced_ratio: list = field(default_factory=list)  # --coalesced-cc-size-ratio
    segment_bytes: int = 0    # pipelining segment for chain/segmented algorithms
    timing: str = ""          # backend timing mode ("" = the backend's default)
    options: dict = field(default_factory=dict)     # backend-specific options

    def validate(self, available_algorithms=None):
        """Normalise names and raise ConfigError for anything wrong."""
        coll = collectives.get(self.collective)
        self.collective = coll.name
        self.dtype = get_dtype(self.dtype).name
        self.op = get_op(self.op) if coll.reduces else "none"
        if not isinstance(self.nranks, int) or self.nranks < 1:
            raise ConfigError(f"need at least 1 rank, got {self.nranks}", "-r/--nworkers")
        if coll.rooted and not 0 <= self.root < self.nranks:
            raise ConfigError(f"root {self.root} is not a rank of 0..{self.nranks - 1}", "--root")
        if not coll.rooted:
            self.root = -1
        for name, flag, low in (("warmup", "-w/--warmup_iters", 0), ("iters", "-n/--iters", 1),
                                ("agg_iters", "-m/--agg-iters", 1)):
            v = getattr(self, name)
            if not isinstance(v, int) or v < low:
                raise ConfigError(f"must be an integer >= {low}, got {v!r}", flag)
        if not self.sizes:
            raise ConfigError("no sizes to run", "-b/--minbytes")
        bad = [p for p in self.placements if p not in PLACEMENTS]
        if bad or not self.placements:
            raise ConfigError(f"unknown placement {bad[0] if bad else ''!r}; use "
                              "out_of_place, in_place or both", "--placement")
        if self.check not in ("", "random", "all_ones"):
            raise ConfigError(f"unknown check {self.check!r}; use random or all_ones", "-c/--check")
        self.stats = [check_stat(s) for s in self.stats]
        if available_algorithms is not None:
            algs = list(self.algorithms)
            if algs == ["all"]:
                algs = list(available_algorithms)
            for a in algs:
                if a not in available_algorithms:
                    raise ConfigError(
                        f"unknown algorithm {a!r} for {coll.name} on backend {self.backend}; "
                        f"choose from {', '.join(available_algorithms)} or all", "--algorithms")
            self.algorithms = list(dict.fromkeys(algs))
        return self

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))

    def digest(self):
        """Hash of the parsed configuration, compared across ranks at start."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]
