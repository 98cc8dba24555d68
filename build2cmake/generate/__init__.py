"""Generate: a build.toml's model rendered into a CMake + scikit-build-core project's files."""
