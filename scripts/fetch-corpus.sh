#!/usr/bin/env bash
# Fetches the test and benchmark inputs from outside the project into one folder, DEST:
#
#   bash scripts/fetch-corpus.sh DEST
#
#   DEST/kernels-community/         huggingface/kernels-community, every project (COMMIT names it)
#   DEST/kernel-builder-examples/   huggingface/kernels' examples/kernels (COMMIT names it)
#   DEST/Build_RadeonFlow_Kernels/  the ROCm guide's project (README.md, gemm/)
#   DEST/rocwmma/                   ROCm/rocWMMA 1.6.0: LICENSE.md and include/, with the
#                                   rocwmma-version.hpp its build generates
#
# Then name DEST in the settings that read it: BUILD2CMAKE_CORPUS (benchmarks/big_kernels.py's
# projects; corpus.py, hipify_corpus.py and device_corpus.py take DEST/kernels-community and
# DEST/kernel-builder-examples as arguments) and BUILD2CMAKE_ROCM_GUIDE (tests/test_rocm72.py).
#
# Where ../shared/corpus/ beside the repository (or the folder BUILD2CMAKE_CORPUS_TARBALLS
# names) holds these trees as tarballs (kernels-corpus.tar.xz: the first two; rocm-guide.tar.xz:
# the last two), each is unpacked; otherwise its repositories are fetched from GitHub at the
# commits pinned below. Both give the same tree. DEST is filled in a folder beside it and renamed
# once complete, so it is whole or absent; a DEST that already holds the four folders is kept.
set -euo pipefail
shopt -s inherit_errexit

KERNELS_COMMUNITY=40d4194f48b6775c4be4776ed08035fabb0e758f  # huggingface/kernels-community
KERNELS=8ac69fc542a4306eade0759ef7c45b4f2ae57df0            # huggingface/kernels
GUIDE=60de0b2f3fe97efafdd133c9ef3cb29aeec86ea0              # Abdennacer-Badaoui/Build_RadeonFlow_Kernels
ROCWMMA=fa7e8ee6f1ad43261fe5a66abddfe7c4ef8e7d6e            # ROCm/rocWMMA develop, 1.6.0 (2024-10-22)
ROCWMMA_VERSION=(1 6 0)
FOLDERS=(kernels-community kernel-builder-examples Build_RadeonFlow_Kernels rocwmma)

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: bash scripts/fetch-corpus.sh DEST" >&2
  exit 2
fi
dest=${1%/}
tarballs=${BUILD2CMAKE_CORPUS_TARBALLS:-$(cd "$(dirname "$0")/.." && pwd)/../shared/corpus}

if [ -e "$dest" ]; then
  for folder in "${FOLDERS[@]}"; do
    if [ ! -d "$dest/$folder" ]; then
      echo "fetch-corpus: $dest exists without $folder/: remove it or name another folder" >&2
      exit 1
    fi
  done
  echo "fetch-corpus: $dest already holds the corpus"
  exit 0
fi

mkdir -p "$(dirname "$dest")"
work=$(mktemp -d "$dest.partial.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir "$tree"

# fetch OWNER/NAME COMMIT: a bare repository under $work holding COMMIT; prints its path.
fetch() {
  local git_dir=$work/git/${1//\//+}
  git init -q --bare "$git_dir"
  echo "fetch-corpus: fetching $1 at ${2:0:12}" >&2
  # The one commit; where a server does not serve a commit by its hash, the default branch.
  if ! git --git-dir="$git_dir" fetch -q --depth 1 "https://github.com/$1.git" "$2" \
      && ! git --git-dir="$git_dir" fetch -q "https://github.com/$1.git"; then
    echo "fetch-corpus: cannot fetch $1 (without a network, put the tarballs in $tarballs)" >&2
    exit 1
  fi
  git --git-dir="$git_dir" cat-file -e "$2^{commit}"
  echo "$git_dir"
}

# export GIT_DIR TREE-ISH INTO [PATH...]: the files of TREE-ISH (a commit, or COMMIT:FOLDER for
# one folder's contents), or only PATHs of it, written under INTO.
export_tree() {
  local git_dir=$1 treeish=$2 into=$3
  shift 3
  mkdir -p "$into"
  git --git-dir="$git_dir" archive --format=tar "$treeish" "$@" | tar -x -C "$into"
}

unpack() {
  echo "fetch-corpus: unpacking $1" >&2
  tar -x -J --no-same-owner -f "$1" -C "$tree"
}

if [ -f "$tarballs/kernels-corpus.tar.xz" ]; then
  unpack "$tarballs/kernels-corpus.tar.xz"
else
  git_dir=$(fetch huggingface/kernels-community "$KERNELS_COMMUNITY")
  export_tree "$git_dir" "$KERNELS_COMMUNITY" "$tree/kernels-community"
  # The repository's own dot files (.github, .gitignore, .gitmodules) are not projects.
  find "$tree/kernels-community" -mindepth 1 -maxdepth 1 -name '.*' -exec rm -rf {} +
  echo "$KERNELS_COMMUNITY" > "$tree/kernels-community/COMMIT"
  git_dir=$(fetch huggingface/kernels "$KERNELS")
  export_tree "$git_dir" "$KERNELS:examples/kernels" "$tree/kernel-builder-examples"
  echo "$KERNELS" > "$tree/kernel-builder-examples/COMMIT"
fi

if [ -f "$tarballs/rocm-guide.tar.xz" ]; then
  unpack "$tarballs/rocm-guide.tar.xz"
else
  git_dir=$(fetch Abdennacer-Badaoui/Build_RadeonFlow_Kernels "$GUIDE")
  export_tree "$git_dir" "$GUIDE" "$tree/Build_RadeonFlow_Kernels" README.md gemm
  git_dir=$(fetch ROCm/rocWMMA "$ROCWMMA")
  version=$(IFS=.; echo "${ROCWMMA_VERSION[*]}")
  if ! git --git-dir="$git_dir" show "$ROCWMMA:CMakeLists.txt" \
      | grep -q "VERSION_STRING \"$version\""; then
    echo "fetch-corpus: ROCm/rocWMMA at $ROCWMMA is not version $version" >&2
    exit 1
  fi
  export_tree "$git_dir" "$ROCWMMA" "$tree/rocwmma" LICENSE.md
  export_tree "$git_dir" "$ROCWMMA:library" "$tree/rocwmma" include
  # The version lines that rocWMMA's CMake configures into this header (from
  # internal/rocwmma-version.hpp.in), which its include/ does not hold before a build.
  printf '#pragma once\n#define ROCWMMA_VERSION_MAJOR %s\n#define ROCWMMA_VERSION_MINOR %s\n#define ROCWMMA_VERSION_PATCH %s\n' \
    "${ROCWMMA_VERSION[@]}" > "$tree/rocwmma/include/rocwmma/rocwmma-version.hpp"
fi

for folder in "${FOLDERS[@]}"; do
  [ -d "$tree/$folder" ] || { echo "fetch-corpus: $folder/ is missing from the sources" >&2; exit 1; }
done
chmod 755 "$tree"
mv -T "$tree" "$dest"
echo "fetch-corpus: $dest holds ${FOLDERS[*]}"
