"""``python -m kernelscope``: the kernelscope command, for an environment whose scripts are not on PATH."""

from kernelscope.entry import main

if __name__ == "__main__":  # imported (a tool listing every module), it runs nothing
    main()
