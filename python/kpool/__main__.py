"""python3 -m kpool install-kernelspec --pool POOL [--name N] [--user | --prefix P] ..."""
import argparse
import sys

from .kernelspec import install_kernelspec


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m kpool")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("install-kernelspec",
                            help="write a kernelspec whose kernels come from a kpoold pool")
    p.add_argument("--pool", required=True, help="the kpoold pool to take kernels from")
    p.add_argument("--name", help="kernelspec name (default: POOL-pooled)")
    p.add_argument("--display-name", help='default: "Python 3 (kpool)" for python3, else "POOL (kpool)"')
    p.add_argument("--language", default="python", help="the pool's kernel language (default: python)")
    p.add_argument("--endpoint", help="kpoold's control endpoint (default: $KPOOL_ENDPOINT or kpoold's default)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user only")
    where.add_argument("--prefix", help="install under PREFIX/share/jupyter/kernels")
    args = parser.parse_args(argv)

    display = args.display_name or ("Python 3 (kpool)" if args.pool == "python3"
                                    else "%s (kpool)" % args.pool)
    path = install_kernelspec(args.pool, args.name or args.pool + "-pooled", display,
                              args.language, args.endpoint, args.user, args.prefix)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
