"""python3 -m kpool install-kernelspec --pool POOL [--name N] [--user | --prefix P] ..."""
import argparse
import sys

from .client import Client, Error
from .kernelspec import install_kernelspec


def pool_info(pool: str, endpoint):
    """The pool's entry in kpoold's status (language, display_name, ...)."""
    for entry in Client(endpoint).status()["pools"]:
        if entry["name"] == pool:
            return entry
    raise Error("unknown_pool", "kpoold has no pool named %r" % pool)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m kpool")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("install-kernelspec",
                            help="write a kernelspec whose kernels come from a kpoold pool")
    p.add_argument("--pool", required=True, help="the kpoold pool to take kernels from")
    p.add_argument("--name", help="kernelspec name (default: POOL-pooled)")
    p.add_argument("--display-name",
                   help="default: the pool's kernelspec display name and \" (kpool)\", as kpoold reports it")
    p.add_argument("--language",
                   help="the pool's kernel language (default: what kpoold reports for the pool)")
    p.add_argument("--endpoint", help="kpoold's control endpoint (default: $KPOOL_ENDPOINT or kpoold's default)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user only")
    where.add_argument("--prefix", help="install under PREFIX/share/jupyter/kernels")
    args = parser.parse_args(argv)

    # Front ends pick the editor mode and the name from the kernelspec: ask kpoold what the pool
    # really runs rather than guessing Python. Needed for the language; the name falls back.
    language, display, pool = args.language, args.display_name, {}
    if language is None or display is None:
        try:
            pool = pool_info(args.pool, args.endpoint)
        except Error as e:
            if language is None:
                print("kpool: %s: %s (give --language to install without asking kpoold)"
                      % (e.code, e.message), file=sys.stderr)
                return 1
    language = language or pool.get("language")
    if not language:
        print("kpool: pool %r cannot start kernels: %s" % (args.pool, pool.get("kernelspec_error")),
              file=sys.stderr)
        return 1
    display = display or "%s (kpool)" % (pool.get("display_name") or args.pool)
    path = install_kernelspec(args.pool, args.name or args.pool + "-pooled", display,
                              language, args.endpoint, args.user, args.prefix)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
