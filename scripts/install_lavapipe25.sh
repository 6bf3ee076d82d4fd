#!/usr/bin/env bash
# Mesa 25's lavapipe beside the system's, for the tests that need an adapter offering binding
# arrays of storage buffers (tests/metal/test_binding_arrays.py; docs/metal.md, "Binding
# arrays"). The system lavapipe (Mesa 22.3 on Debian 12) offers none and stays the default for
# everything else.
#
# No system change: apt downloads from Debian's bookworm-backports with a sources list, package
# lists and cache of its own (under the target directory), the three packages are checked
# against pinned SHA-256 sums and unpacked with dpkg -x (nothing is installed), and an ICD file
# with the absolute path of the driver is written next to them. Use it as
#
#   VK_ICD_FILENAMES=$DIR/lvp25.json LD_LIBRARY_PATH=$DIR/root/usr/lib/x86_64-linux-gnu python ...
#
# DIR: $SPIRAD_LAVAPIPE25, else ~/.cache/spirad/lavapipe25 (a cache directory outside the
# checkout: CI clones afresh, the download is kept). tests/support/lavapipe25.py reads the same.
# Linux on x86-64 with apt (Debian's archive keyring) only; elsewhere this prints why and exits 0
# (a Mac runs Metal itself; the tests then say what is missing).
set -euo pipefail
if [ "$(uname -s)" != "Linux" ] || [ "$(uname -m)" != "x86_64" ]; then
    echo "install_lavapipe25.sh: Linux x86-64 only (this is $(uname -s) $(uname -m)); skipped" >&2
    exit 0
fi
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg  # signs bookworm-backports
if [ ! -f "$KEYRING" ] || ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
    echo "install_lavapipe25.sh: needs apt-get, dpkg and Debian's archive keyring ($KEYRING); skipped" >&2
    exit 0
fi
DIR="${SPIRAD_LAVAPIPE25:-${XDG_CACHE_HOME:-$HOME/.cache}/spirad/lavapipe25}"
LIB="$DIR/root/usr/lib/x86_64-linux-gnu"
# package  version  sha256 of the .deb (bookworm-backports' Packages index, checked 2026-12-06)
PINS=(
    "mesa-vulkan-drivers 25.0.7-2~bpo12+1 3899f1800424c60a05df5d6913076a526ca8fdbabec43672cd397563d1ca3263"
    "libdrm2 2.4.123-1~bpo12+1 9cc2f341964286295124a32d3625edb76730500625e54a1e682761f883064d7b"
    "libdrm-amdgpu1 2.4.123-1~bpo12+1 334e2ae389af0e9cb607c2ccfbbf7ae9feb34131ff998550baeffeeae6cda296"
)
if [ -f "$DIR/lvp25.json" ] && [ -f "$LIB/libvulkan_lvp.so" ] && [ -f "$DIR/.complete" ]; then
    exit 0  # unpacked by an earlier run
fi
mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/archives/partial" "$DIR/debs"
cat > "$DIR/apt/sources.list" <<EOF
deb [signed-by=$KEYRING] http://deb.debian.org/debian bookworm-backports main
EOF
APT=(-o "Dir::Etc::SourceList=$DIR/apt/sources.list" -o "Dir::Etc::SourceParts=-"
     -o "Dir::State::Lists=$DIR/apt/lists" -o "Dir::Cache::Archives=$DIR/apt/archives"
     -o "APT::Architecture=amd64" -o "APT::Architectures=amd64" -o "Debug::NoLocking=1"
     -o "APT::Sandbox::User=$(id -un)")
apt-get -qq "${APT[@]}" update
cd "$DIR/debs"
for pin in "${PINS[@]}"; do
    read -r pkg ver sum <<<"$pin"
    deb="${pkg}_${ver/:/%3a}_amd64.deb"
    if [ ! -f "$deb" ] || ! echo "$sum  $deb" | sha256sum -c --status; then
        rm -f "$deb"
        apt-get -qq "${APT[@]}" download "$pkg=$ver"
    fi
    if ! echo "$sum  $deb" | sha256sum -c --status; then
        echo "install_lavapipe25.sh: $deb does not have the pinned SHA-256 $sum" >&2
        exit 1
    fi
done
rm -rf "$DIR/root"
for pin in "${PINS[@]}"; do
    read -r pkg ver _ <<<"$pin"
    dpkg -x "${pkg}_${ver/:/%3a}_amd64.deb" "$DIR/root"
done
# the package's lvp_icd json names the library without a path: point it at this copy
cat > "$DIR/lvp25.json" <<EOF
{
    "ICD": {
        "api_version": "1.4.305",
        "library_path": "$LIB/libvulkan_lvp.so"
    },
    "file_format_version": "1.0.0"
}
EOF
touch "$DIR/.complete"
echo "lavapipe (Mesa 25.0.7) unpacked in $DIR"
