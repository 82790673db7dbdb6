"""A module with a non-ASCII file name and a function with a CJK name."""


def グリーティング(park):
    return 挨拶_ü(park)


def 挨拶_ü(park):
    park("unicode")
