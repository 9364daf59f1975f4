# spillway/_version.py - the release, in one place: the Makefile (spillway.pc, man pages) and pyproject.toml
# read it from here. Pure data.
__version__ = "0.20.0"
