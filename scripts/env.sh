# Sourced by the project's scripts: puts the tools that scripts/setup installs on PATH and
# picks the toolchain that can build wasm32 (rustup's own, or the offline `system` one).
export PATH="$HOME/.cargo/bin:/usr/local/bin:$PATH"
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
   && rustup toolchain list 2>/dev/null | grep -q '^system'; then
  export RUSTUP_TOOLCHAIN=system
fi
