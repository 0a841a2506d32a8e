#!/usr/bin/env bash
# package.sh: build the release artifacts into OUTDIR (default out/): dynolog_<v>_<arch>.deb and
# .rpm (dynolog + dyno linked statically apart from glibc, unit, gflags, logrotate; 00-overview
# docs/design/contract.md#packaging) and one mindstudio_monitor wheel per CPython with headers. See docs/packaging.md.
#
# Usage: scripts/package.sh [OUTDIR]
#        scripts/package.sh --deps-only   fetch/build the static cJSON archive, print its path
# Environment:
#   MSMON_VERSION_OVERRIDE  package/binary version instead of the VERSION file's (upgrade tests)
#   MSMON_PKG_BUILD_DIR     CMake build dir of the static build (default OUTDIR/.build/static-<v>)
#   MSMON_PKG_WHEELS=0      skip the wheels;  MSMON_PKG_RPM=0 skip the .rpm
#   MSMON_WHEEL_BUILD_DIR   an existing (shared-library) build tree to reuse for the wheel of the
#                           interpreter it was configured with
#   MSMON_CJSON_STATIC_LIB  a libcjson.a to use (Debian ships none; default: built from Debian's
#                           cjson source of the installed version, cached in MSMON_DEPS_CACHE)
#   JOBS                    build parallelism (default 2)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS_ONLY=0
if [ "${1:-}" = --deps-only ]; then DEPS_ONLY=1; shift; fi
OUT=$(mkdir -p "${1:-$ROOT/out}" && cd "${1:-$ROOT/out}" && pwd)
JOBS=${JOBS:-2}
VERSION=${MSMON_VERSION_OVERRIDE:-$(head -n1 "$ROOT/VERSION" | tr -d '[:space:]')}
case "$VERSION" in
  ''|*[!0-9A-Za-z.+~-]*) echo "package: bad version '$VERSION'" >&2; exit 2 ;;
esac
ARCH=$(uname -m)
case "$ARCH" in
  x86_64) DEB_ARCH=amd64 ;;
  aarch64) DEB_ARCH=arm64 ;;
  *) echo "package: unsupported architecture $ARCH (x86_64 and aarch64 only)" >&2; exit 2 ;;
esac
WORK="$OUT/.build"
BUILD=${MSMON_PKG_BUILD_DIR:-$WORK/static-$VERSION}
DEPS_CACHE=${MSMON_DEPS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/msmonitor-deps}
mkdir -p "$WORK"

log() { echo "package: $*"; }

# Debian's libcjson-dev has no .a, so fetch the source of exactly the installed libcjson1
# (security patches included) with apt through a private source list (nothing in /etc/apt
# changes) and archive its one file. Cached per version.
cjson_static() {
  if [ -n "${MSMON_CJSON_STATIC_LIB:-}" ]; then echo "$MSMON_CJSON_STATIC_LIB"; return; fi
  local multiarch sys ver dir
  multiarch=$(gcc -print-multiarch 2>/dev/null || true)
  sys="/usr/lib/$multiarch/libcjson.a"
  if [ -n "$multiarch" ] && [ -f "$sys" ]; then echo "$sys"; return; fi
  ver=$(dpkg-query -W -f='${Version}' libcjson1 2>/dev/null || true)
  [ -n "$ver" ] || { echo "package: libcjson1 is not installed (scripts/install-deps.sh)" >&2; return 1; }
  dir="$DEPS_CACHE/cjson-$ver"
  if [ ! -f "$dir/libcjson.a" ]; then
    local apt="$dir/apt" codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
    rm -rf "$dir" && mkdir -p "$apt/lists/partial" "$dir/src"
    {
      echo "deb-src http://deb.debian.org/debian $codename main"
      echo "deb-src http://deb.debian.org/debian $codename-updates main"
      echo "deb-src http://deb.debian.org/debian-security $codename-security main"
    } > "$apt/sources.list"
    local o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$apt/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
    echo "package: fetching Debian's cjson $ver source for a static libcjson.a" >&2
    apt-get "${o[@]}" -qq update >&2
    ls "$apt/lists"/*Sources* > /dev/null 2>&1 \
      || { echo "package: cannot fetch Debian's source index (no network?); set MSMON_CJSON_STATIC_LIB" >&2; return 1; }
    (cd "$dir/src" && apt-get "${o[@]}" -qq source "cjson=$ver" >&2)
    local c
    c=$(find "$dir/src" -maxdepth 2 -name cJSON.c | head -n1)
    [ -n "$c" ] || { echo "package: cJSON.c not found in the cjson source" >&2; return 1; }
    gcc -std=c89 -O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2 -c "$c" -o "$dir/cJSON.o"
    ar rcs "$dir/libcjson.a" "$dir/cJSON.o"
  fi
  echo "$dir/libcjson.a"
}

# --- dynolog + dyno, static third-party libraries --------------------------------------------
CJSON_A=$(cjson_static)
if [ "$DEPS_ONLY" = 1 ]; then echo "$CJSON_A"; exit 0; fi
log "version $VERSION, arch $ARCH, build dir $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMSMON_STATIC_DEPS=ON \
      -DMSMON_CJSON_STATIC_LIB="$CJSON_A" -DMSMON_VERSION_OVERRIDE="$VERSION" > "$BUILD.configure.log" \
  || { cat "$BUILD.configure.log" >&2; exit 1; }
cmake --build "$BUILD" -j "$JOBS" --target dynolog dyno

STAGE="$WORK/stage-$VERSION"
rm -rf "$STAGE"
install -d "$STAGE/usr/local/bin" "$STAGE/usr/lib/systemd/system" "$STAGE/etc/logrotate.d"
install -m 0755 -s "$BUILD/src/daemon/dynolog" "$STAGE/usr/local/bin/dynolog"
install -m 0755 -s "$BUILD/src/cli/dyno" "$STAGE/usr/local/bin/dyno"
install -m 0644 "$ROOT/packaging/dynolog.service" "$STAGE/usr/lib/systemd/system/dynolog.service"
install -m 0644 "$ROOT/packaging/dynolog.gflags" "$STAGE/etc/dynolog.gflags"
install -m 0644 "$ROOT/packaging/dynolog.logrotate" "$STAGE/etc/logrotate.d/dynolog.conf"

# --- .deb ---------------------------------------------------------------------------------
DEBROOT="$WORK/deb-$VERSION"
rm -rf "$DEBROOT" && cp -a "$STAGE" "$DEBROOT" && install -d "$DEBROOT/DEBIAN"
KB=$(du -sk "$STAGE" | cut -f1)
sed -e "s/@VERSION@/$VERSION/" -e "s/@DEB_ARCH@/$DEB_ARCH/" -e "s/@INSTALLED_KB@/$KB/" \
    "$ROOT/packaging/deb/control.in" > "$DEBROOT/DEBIAN/control"
install -m 0644 "$ROOT/packaging/deb/conffiles" "$DEBROOT/DEBIAN/conffiles"
for s in postinst prerm postrm; do install -m 0755 "$ROOT/packaging/deb/$s" "$DEBROOT/DEBIAN/$s"; done
DEB="$OUT/dynolog_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group -Zxz --build "$DEBROOT" "$DEB" > /dev/null
log "built $DEB"

# --- .rpm ---------------------------------------------------------------------------------
if [ "${MSMON_PKG_RPM:-1}" != 0 ]; then
  command -v rpmbuild > /dev/null || { echo "package: rpmbuild missing (apt-get install rpm)" >&2; exit 1; }
  TOP="$WORK/rpm-$VERSION"
  rm -rf "$TOP" && mkdir -p "$TOP/SPECS" "$TOP/RPMS" "$TOP/BUILD" "$TOP/tmp"
  sed -e "s/@VERSION@/$VERSION/" -e "s/@RPM_ARCH@/$ARCH/" "$ROOT/packaging/rpm/dynolog.spec.in" \
      > "$TOP/SPECS/dynolog.spec"
  # Prebuilt stripped binaries: no debuginfo, no build-id links, no brp post-processing;
  # gzip payload so older rpm (EL7) can read it; HOME kept away from ~/.rpmmacros.
  HOME="$TOP" rpmbuild -bb --nodeps --target "$ARCH-linux" \
      --define "_topdir $TOP" --define "_tmppath $TOP/tmp" --define "_stage $STAGE" \
      --define "debug_package %{nil}" --define "_build_id_links none" \
      --define "__os_install_post %{nil}" --define "_binary_payload w9.gzdio" \
      "$TOP/SPECS/dynolog.spec" > "$TOP/rpmbuild.log" 2>&1 || { cat "$TOP/rpmbuild.log" >&2; exit 1; }
  RPM="$OUT/dynolog_${VERSION}_${ARCH}.rpm"
  mv "$(find "$TOP/RPMS" -name 'dynolog-*.rpm' | head -n1)" "$RPM"
  log "built $RPM"
fi

# --- wheels: one per CPython with headers (and pip/setuptools/wheel) ----------------------
if [ "${MSMON_PKG_WHEELS:-1}" != 0 ]; then
  declare -A seen=()
  built=0
  for py in /usr/bin/python3 /usr/bin/python3.[0-9]* /usr/local/bin/python3.[0-9]*; do
    case "$py" in *-config|*m) continue ;; esac
    [ -x "$py" ] || continue
    tag=$("$py" -c 'import sys; assert sys.version_info >= (3, 8); print("cp%d%d" % sys.version_info[:2])' \
          2>/dev/null) || continue   # the wheel supports CPython 3.8+
    [ -z "${seen[$tag]:-}" ] || continue
    if ! "$py" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
      log "skip $py ($tag): no CPython headers"; continue
    fi
    if ! "$py" -c 'import setuptools, wheel, pip' 2>/dev/null; then
      log "skip $py ($tag): setuptools/wheel/pip missing"; continue
    fi
    seen[$tag]=1
    wbuild="$WORK/wheel-$tag"
    reuse=${MSMON_WHEEL_BUILD_DIR:-}
    if [ -n "$reuse" ] && grep -qx "MSMON_PYTHON:FILEPATH=$(readlink -f "$py")\|MSMON_PYTHON:FILEPATH=$py" \
         "$reuse/CMakeCache.txt" 2>/dev/null; then
      wbuild=$reuse
    fi
    if [ ! -f "$wbuild/CMakeCache.txt" ]; then
      cmake -S "$ROOT" -B "$wbuild" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMSMON_PYTHON="$py" \
            > "$WORK/wheel-$tag.configure.log" || { cat "$WORK/wheel-$tag.configure.log" >&2; exit 1; }
    fi
    rm -f "$OUT"/mindstudio_monitor-*-"$tag"-"$tag"-linux_"$ARCH".whl
    MSMON_WHEEL_BUILD_DIR="$wbuild" PIP_NO_INDEX=1 CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
      "$py" -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$ROOT" > "$WORK/wheel-$tag.log" 2>&1 \
      || { tail -n 40 "$WORK/wheel-$tag.log" >&2; exit 1; }
    log "built $(ls "$OUT"/mindstudio_monitor-*-"$tag"-"$tag"-linux_"$ARCH".whl)"
    built=$((built + 1))
  done
  [ "$built" -gt 0 ] || { echo "package: no CPython with headers and pip/setuptools/wheel found" >&2; exit 1; }
fi
