#!/usr/bin/env bash
# cuda-sdk.sh: find or fetch what cgo needs to build gpuarena with -tags cuda
# (gorgonia.org/cu): the header cuda.h and a libcuda.so to link against.
# It does not install anything and needs no GPU.
#
#   eval "$(scripts/cuda-sdk.sh)"
#   go build -tags cuda ./...
#
# Where it looks, first match wins:
#   1. /usr/local/cuda (a CUDA toolkit) when GPUARENA_CUDA_SDK is unset and
#      the toolkit is older than CUDA 13 (gorgonia.org/cu v0.9.6 does not
#      compile against CUDA 13's cuda.h): include/cuda.h and the first of
#      lib64/, lib64/stubs/, targets/<arch>-linux/lib/stubs/ holding libcuda.so.
#   2. A cache folder, filled on first use: ${GPUARENA_CUDA_SDK:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuarena/cuda-sdk}.
#      It is filled from Debian's non-free packages nvidia-cuda-dev (cuda.h)
#      and libcuda1 (the driver library), fetched with apt-get download through
#      a private apt setup (its own sources.list, lists and cache under the
#      cache folder), so the machine's apt state is left untouched. The
#      packages are unpacked with dpkg-deb, only the files cgo needs are kept,
#      and the .deb files are deleted. A second run finds the cache and
#      fetches nothing.
#
# stdout: export lines for CGO_ENABLED, CGO_CFLAGS and CGO_LDFLAGS, nothing
# else, so that eval works. Progress and errors go to stderr.
#
# Environment:
#   GPUARENA_CUDA_SDK    the cache folder (see above); when set, the toolkit
#                        is not looked at
#   GPUARENA_CUDA_SUITE  the Debian suite to take the packages from (default
#                        bookworm: CUDA 11.8 headers, driver 535 library)
#
# The binary links against libcuda.so.1 (the soname) and loads the machine's
# own driver library at run time; no rpath to the cache is written.
set -euo pipefail

log() { printf 'cuda-sdk: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shquote prints $1 single-quoted for the shell.
shquote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# emit prints the export lines for an include folder and a library folder.
emit() {
	local inc=$1 lib=$2
	# Go's default for both variables is "-O2 -g"; setting them replaces it,
	# so keep it.
	printf 'export CGO_ENABLED=1\n'
	printf 'export CGO_CFLAGS=%s\n' "$(shquote "-O2 -g -I$inc")"
	printf 'export CGO_LDFLAGS=%s\n' "$(shquote "-O2 -g -L$lib")"
}

if ! command -v "${CC:-gcc}" >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
	log "warning: no C compiler (${CC:-gcc}) on PATH: cgo, and so -tags cuda, needs one (apt-get install gcc)"
fi

# cuda_version prints the CUDA_VERSION a cuda.h defines (11080 for 11.8).
cuda_version() { sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$1" | head -n 1; }

# gorgonia.org/cu v0.9.6 compiles against the cuda.h of CUDA 11.8 and 12.4
# but not 13.0, whose cuda.h maps cuCtxCreate, cuMemAdvise,
# cuMemPrefetchAsync and cuGraph*Dependencies to new signatures (_v2/_v4).
max_cuda_version=12999

# use_toolkit emits the flags for the toolkit in $1 and returns 0, or says
# why not and returns 1.
use_toolkit() {
	local toolkit=$1 v lib
	[[ -f $toolkit/include/cuda.h ]] || return 1
	v=$(cuda_version "$toolkit/include/cuda.h")
	if (( ${v:-0} > max_cuda_version )); then
		log "$toolkit is CUDA ${v:-?}: gorgonia.org/cu v0.9.6 does not compile against its cuda.h; using the cache"
		return 1
	fi
	for lib in "$toolkit/lib64" "$toolkit/lib64/stubs" "$toolkit/targets/$(uname -m)-linux/lib/stubs"; do
		if [[ -e $lib/libcuda.so ]]; then
			log "using the CUDA toolkit (CUDA ${v:-?}): $toolkit/include, $lib"
			emit "$toolkit/include" "$lib"
			return 0
		fi
	done
	log "$toolkit/include/cuda.h exists but no libcuda.so under $toolkit; using the cache"
	return 1
}

# 1. A CUDA toolkit, unless GPUARENA_CUDA_SDK names a cache to use.
if [[ -z ${GPUARENA_CUDA_SDK:-} ]] && use_toolkit /usr/local/cuda; then
	exit 0
fi

# 2. The cache.
sdk=${GPUARENA_CUDA_SDK:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuarena/cuda-sdk}
inc=$sdk/include
lib=$sdk/lib
if [[ -f $inc/cuda.h && -e $lib/libcuda.so ]]; then
	log "using the cached CUDA SDK in $sdk ($(head -n 1 "$sdk/SOURCE" 2>/dev/null || echo 'source unknown'))"
	emit "$inc" "$lib"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
	die "no usable CUDA toolkit in /usr/local/cuda, and no apt-get/dpkg-deb to fetch Debian's packages: install the CUDA toolkit, or run this on Debian"
fi
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -f $keyring ]] || die "$keyring is missing (apt-get install debian-archive-keyring)"

suite=${GPUARENA_CUDA_SUITE:-bookworm}

# debian_mirror prints the URI of the Debian archive this machine's apt uses
# (deb822 .sources files and one-line .list files), else deb.debian.org.
debian_mirror() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		# One-line: "deb [opts] URI suite comp..."; deb822: "URIs: URI [URI...]".
		sed -n -e 's/^[[:space:]]*URIs:[[:space:]]*//p' \
			-e 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?//p' "$f" |
			tr -s '[:blank:]' '\n'
	done | grep -E '^(https?|file)://[^[:space:]]*/debian/?$' | head -n 1 | sed 's:/*$::'
}
mirror=$(debian_mirror || true)
mirror=${mirror:-http://deb.debian.org/debian}

mkdir -p "$(dirname "$sdk")"
work=$(mktemp -d "$sdk.tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT

apt=$work/apt
mkdir -p "$apt/sources.list.d" "$apt/preferences.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$work/debs" "$work/root"
# Only non-free: both packages live there, and its index is small.
printf 'deb [signed-by=%s] %s %s non-free\n' "$keyring" "$mirror" "$suite" >"$apt/sources.list"
aptopts=(
	-o "Dir::Etc::SourceList=$apt/sources.list"
	-o "Dir::Etc::SourceParts=$apt/sources.list.d"
	-o "Dir::Etc::Preferences=/dev/null"
	-o "Dir::Etc::PreferencesParts=$apt/preferences.d"
	-o "Dir::State::Lists=$apt/lists"
	-o "Dir::Cache=$apt/cache"
	-o "Acquire::Languages=none"
	-o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false"
)
if [[ $(id -u) == 0 ]]; then
	# apt drops to the _apt user to download; it cannot write under a
	# private folder of root's (such as /root/.cache), so do what apt would
	# fall back to anyway, without the warning.
	aptopts+=(-o "APT::Sandbox::User=root")
fi

log "fetching the package lists of $mirror $suite non-free (private apt setup in $apt)"
apt-get "${aptopts[@]}" -qq update >&2 || die "apt-get update failed"
log "downloading nvidia-cuda-dev (about 800 MB, for cuda.h) and libcuda1"
(cd "$work/debs" && apt-get "${aptopts[@]}" -qq download nvidia-cuda-dev libcuda1 >&2) ||
	die "apt-get download nvidia-cuda-dev libcuda1 failed"

log "unpacking cuda.h and libcuda"
for deb in "$work"/debs/*.deb; do
	# Only the files we keep: nvidia-cuda-dev unpacks to about 2.8 GB whole.
	dpkg-deb --fsys-tarfile "$deb" |
		tar -x -C "$work/root" --wildcards './usr/include/cuda.h' './usr/lib/*/libcuda.so*' \
			2>/dev/null || true # each package holds only some of the names
done

out=$work/sdk
mkdir -p "$out/include" "$out/lib"
[[ -f $work/root/usr/include/cuda.h ]] || die "cuda.h not found in nvidia-cuda-dev"
v=$(cuda_version "$work/root/usr/include/cuda.h")
(( ${v:-0} <= max_cuda_version )) ||
	log "warning: $suite's cuda.h is CUDA ${v:-?}: gorgonia.org/cu v0.9.6 may not compile against it (bookworm's 11.8 does)"
# cuda.h includes only <stdlib.h> and <stdint.h>, and gorgonia.org/cu
# includes only <cuda.h>: the one header is enough.
cp "$work/root/usr/include/cuda.h" "$out/include/"
# The driver library: the regular file libcuda.so.<version> from libcuda1
# (not the stub under stubs/ that nvidia-cuda-dev also carries).
real=$(find "$work/root/usr/lib" -path '*/stubs/*' -prune -o -type f -name 'libcuda.so.*' -print | head -n 1)
[[ -n $real ]] || die "libcuda.so.<version> not found in libcuda1"
cp "$real" "$out/lib/"
ln -s "$(basename "$real")" "$out/lib/libcuda.so.1"
ln -s libcuda.so.1 "$out/lib/libcuda.so"

{
	printf 'Debian %s non-free from %s:' "$suite" "$mirror"
	for deb in "$work"/debs/*.deb; do printf ' %s' "$(dpkg-deb -f "$deb" Package)=$(dpkg-deb -f "$deb" Version)"; done
	printf '\nfetched %s by scripts/cuda-sdk.sh\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$out/SOURCE"

# Publish atomically; if another run got there first, keep its copy.
if ! mv -T "$out" "$sdk" 2>/dev/null; then
	[[ -f $inc/cuda.h && -e $lib/libcuda.so ]] || die "could not move the SDK into $sdk"
	log "another run filled $sdk first; using it"
fi
log "CUDA SDK ready in $sdk ($(head -n 1 "$sdk/SOURCE"))"
emit "$inc" "$lib"
