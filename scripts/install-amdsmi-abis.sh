#!/usr/bin/env bash
# Fetches AMD's own amdsmi Python packages of ABIs 24, 25 and 26 (tests/amd_abi/requirements.txt,
# pinned) into the ignored directory .venv-amdsmi-abis/<version>/, unpacked, for the test that
# holds zeus-cpp's structure layouts to AMD's ctypes definitions (tests/amd_abi/check_layouts.py).
# The wheels are pure Python and are never imported or installed into an environment. Idempotent.
# `make test` calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly kDir=".venv-amdsmi-abis"
mkdir -p "$kDir"
while read -r pin; do
  [[ -z "$pin" || "$pin" == \#* ]] && continue
  version="${pin#amdsmi==}"
  if [[ -f "$kDir/$version/amdsmi/amdsmi_wrapper.py" ]]; then
    continue
  fi
  rm -rf "$kDir/$version" "$kDir/wheel-$version"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps "$pin" \
    -d "$kDir/wheel-$version"
  python3 -m zipfile -e "$kDir"/wheel-"$version"/amdsmi-"$version"-*.whl "$kDir/$version"
  rm -rf "$kDir/wheel-$version"
done < tests/amd_abi/requirements.txt
echo "install-amdsmi-abis: $(ls "$kDir" | tr '\n' ' ')in $kDir"
