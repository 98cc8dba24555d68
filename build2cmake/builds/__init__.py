"""Builds: compile a kernel into build/<variant>/, here or in a toolchain, once per Hub variant."""
