#!/usr/bin/env bash
# The layers of src/ (docs/architecture.md), lowest first: a folder may include its own headers and those of the
# folders listed for it, nothing above. CMake links each layer's library against the ones below only, so a call
# that runs up fails to link; this catches what a link cannot see (templates, inline functions, types).
# Run by ctest (Layers.IncludesRunDownOnly); exits 1 naming each include that runs up.
set -euo pipefail
# The backends implement runtime/'s interfaces (the DiT's stages, the VAE's ops, the text encoder's forward) from
# model/ and ops/ alone: vae/ and t5/ sit above them and walk their models over those interfaces.
cd "$(dirname "$0")/../src"
declare -A allowed=(
  [core]=""
  [io]="core"
  [ops]="core"
  [model]="core io ops"
  [runtime]="core io ops model"
  [backend/cpu]="core io ops model runtime"
  [backend/cuda]="core io ops model runtime backend/cpu"
  [registry]="core io ops model runtime backend/cpu backend/cuda"
  [vae]="core io ops model runtime backend/cpu"
  [t5]="core io ops model runtime backend/cpu"
  [data]="core io"
  [eval]="core io data"
  [plan]="core io ops model runtime registry"
  [sample]="core io ops model runtime backend/cpu vae t5 data eval"
  [train]="core io ops model runtime backend/cpu registry vae t5 data plan sample"
  [dist]="core runtime"
  [dist/mpi_plugin]="dist"
  [cli]="core io ops model runtime backend/cpu backend/cuda registry vae t5 data eval plan sample train dist"
)
status=0
while IFS= read -r file; do
  folder=$(dirname "$file")
  if [[ ! -v allowed[$folder] ]]; then
    echo "check-layers: src/$file is in a folder with no layer (add src/$folder to tools/check-layers.sh)"
    status=1
    continue
  fi
  while IFS= read -r target; do
    dep=$(dirname "$target")
    [[ "$dep" == "$folder" || " ${allowed[$folder]} " == *" $dep "* ]] && continue
    echo "check-layers: src/$file includes \"$target\": src/$folder may include only ${allowed[$folder]:-nothing} (and itself)"
    status=1
  done < <(sed -n 's/^#include "\([a-z_]*\(\/[a-z_]*\)*\/[^"]*\)".*/\1/p' "$file")
done < <(find . -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sed 's|^\./||' | sort)
exit $status
