"""The names synthetic race programs draw from: disjoint pools, one per role (arrays, loop indices, accumulators,
...), and wider pools of the words real programs use for the "wide" surface (``prepare.race.surface: wide``).

Order matters: ``Program`` draws by index from these tuples, so reordering or editing a pool changes every generated
item (the prepared data is then new, and DVC reruns the stages after it).

Not an entry point: used by ``programs.Program``.
Test: ``pytest tests/data/race/test_generator.py`` (the pools are disjoint and free of label words).
"""

from __future__ import annotations

# Disjoint name pools, one per role. No name contains a label word (race, yes, no, safe, bug, DRB) and none
# shadows a C library function or a Fortran intrinsic (hence no sum, max, size, len, index, scale).
POOLS: dict[str, tuple[str, ...]] = {
    "arr": ("a", "b", "c", "d", "e", "x", "y", "z", "u", "v", "w", "arr", "vec", "buf", "vals", "src", "dst",
            "grid", "coef", "lhs", "rhs", "f", "g"),
    "loop": ("i", "j", "k", "ii", "jj", "kk", "ix", "iy", "it"),
    "tmp": ("t", "tmp", "temp", "scratch", "work", "cur", "hold", "tval", "aux"),
    "acc": ("s", "total", "acc", "accum", "tot", "res", "dot", "psum", "agg"),
    "peak": ("peak", "top", "hi", "mx", "vmax", "biggest", "best"),
    "cnt": ("cnt", "hits", "tally", "matches", "events", "hitcount"),
    "hist": ("hist", "bins", "freq", "buckets", "h"),
    "idx": ("idx", "indx", "perm", "ind", "pos", "sel", "slot", "ord"),
    "task": ("p", "r", "left", "right", "part1", "part2", "first", "second", "lo_part", "hi_part", "val1", "val2"),
    "bar": ("base", "offset", "shift", "bias", "factor", "level"),
    "size_c": ("n", "len", "size", "num", "dim", "nelem"),
    "size_f": ("n", "nn", "sz", "npts", "nx", "ntot"),
    "fn": ("fill", "init_value", "start_value", "make_value", "gen_value"),
    "prog": ("main_prog", "compute", "kernel", "loops", "driver", "demo", "calc"),
    "chk": ("chk", "checksum", "cs", "digest", "verify"),
    "mat": ("m", "mat", "grid2", "field", "tile", "plane", "img", "q", "r2", "k2"),
    "col": ("j", "jj", "col", "jx", "kk2", "m2"),
    "lock": ("lck", "lock", "mtx", "guard", "mutex", "writelock"),
    "helper": ("update", "step", "apply", "transform", "evaluate", "combine", "advance", "compute_one", "next_value"),
    "state": ("calls", "hold", "last", "prev", "memo", "saved", "state"),
}
# More names per role for the "wide" surface (``prepare.race.surface``): the words real programs use. Disjoint from
# every pool above and from each other, with the same exclusions.
WIDE: dict[str, tuple[str, ...]] = {
    "arr": ("rate", "growth", "mass", "vel", "flux", "energy", "density", "price", "weight", "pressure", "temp_in",
            "sig", "cell", "pt_val", "score", "amp", "yold", "ynew", "xs", "ys", "data", "input",
            "output", "table", "series", "samples", "values", "col_a", "row_b"),
    "loop": ("idx2", "row", "ir", "cnt_i", "n1", "l"),
    "tmp": ("val", "diff", "ratio", "term", "local", "partial", "mid", "delta"),
    "acc": ("sum1", "energy_tot", "sqsum", "sumsq", "mass_tot", "checks"),
    "peak": ("maxval_", "largest", "upper", "record"),
    "cnt": ("nfound", "npos", "ncalls", "k_count"),
    "hist": ("histo", "counts", "occ"),
    "idx": ("map", "order", "owner", "perm2"),
    "task": ("fa", "fb", "xa", "xb", "res1", "res2", "half1", "half2"),
    "bar": ("init", "coeff", "alpha", "beta", "gamma_"),
    "size_c": ("count_n", "nitems", "total_n", "nvals"),
    "size_f": ("np", "ncell", "nlen", "msize"),
    "fn": ("compute_init", "setup_value", "seed_value"),
    "prog": ("test", "main_loop", "solver", "app", "bench"),
    "chk": ("total_chk", "verify_sum", "summary"),
    "mat": ("amat", "bmat", "cmat", "mat_a", "mat_b", "u2", "phi"),
    "col": ("c2", "jcol", "kk3"),
    "lock": ("lk", "the_lock", "mylock"),
    "helper": ("work_on", "process", "handle", "do_step", "relax"),
    "state": ("counter", "history", "cache_v", "stash"),
}
