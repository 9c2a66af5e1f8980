# bpfkit's integration-test image: Debian bookworm, clang/libbpf headers/bpftool, bpfkit installed.
# Keep the apt list in step with scripts/setup.sh's APT_PACKAGES (the test run calls setup.sh).
# The default command builds bpf/ against the running kernel's BTF and runs the test suites.
#
#   podman build --network host -t bpfkit-test .            (or docker build)
#   podman run --rm --privileged --pid=host bpfkit-test      (or docker run --privileged --pid=host)
#
# --privileged gives the container CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN and /sys/kernel/btf;
# the entry point mounts tracefs and bpffs inside when they are absent. --pid=host: BPF
# helpers such as bpf_get_current_pid_tgid() report pids of the initial pid namespace, and the
# tests compare them with os.getpid(); in a private pid namespace every pid filter misses.
# Two targets. The last one, `test` (the default), is the integration-test image described
# above. `production` is what a fleet runs (deploy/kubernetes/, docs/fleet.md): Python and bpfkit
# with the metrics and otlp extras, nothing else (no compiler, no headers, no tests):
#
#   podman build --network host --target production -t bpfkit:prod .
#   podman run --rm --privileged --pid=host bpfkit:prod features

# A wheel of bpfkit (with its bytecode), built where pip and the source are.
FROM debian:bookworm-slim AS wheel
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ARG PIP_CERT=""
WORKDIR /src
# LICENSE, LICENSES/: pyproject.toml's license-files, which the wheel carries.
COPY pyproject.toml README.md LICENSE _bpfkit_console.py ./
COPY LICENSES ./LICENSES
COPY bpfkit ./bpfkit
RUN if [ -z "$PIP_CERT" ]; then unset PIP_CERT; fi \
 && python3 -m venv /opt/bpfkit \
 && /opt/bpfkit/bin/pip install -q --no-compile wheel \
 && /opt/bpfkit/bin/pip wheel -q --no-deps -w /wheels . \
 && /opt/bpfkit/bin/pip install -q "$(ls /wheels/bpfkit-*.whl)[metrics,otlp]" \
 && /opt/bpfkit/bin/python -m compileall -q /opt/bpfkit/lib

FROM debian:bookworm-slim AS production
# python3: the interpreter; mount: bpfkit mounts tracefs/bpffs where the host has not.
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 mount \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
COPY --from=wheel /opt/bpfkit /opt/bpfkit
ENV PATH=/opt/bpfkit/bin:$PATH PYTHONUNBUFFERED=1
# The metrics port (docs/fleet.md); objects and configs come from volumes (the DaemonSet's
# ConfigMaps) or an image built FROM this one.
EXPOSE 9435
ENTRYPOINT ["bpfkit"]
CMD ["features"]

FROM debian:bookworm-slim AS test

# BPFKIT_SKIP_VM: the image runs the host suite only (other kernels need qemu: scripts/test-matrix.sh).
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 BPFKIT_SKIP_VM=1
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends \
      python3 python3-venv clang-19 llvm-19 libbpf-dev bpftool gcc make libc6-dev linux-libc-dev \
      systemtap-sdt-dev libelf-dev zlib1g-dev iproute2 ca-certificates mount kmod prometheus zsh groff-base \
      linux-perf golang-go chromium \
 && rm -rf /var/lib/apt/lists/*

# A build behind a TLS-intercepting proxy can pass its CA bundle (integration/container.sh does):
#   --volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg PIP_CERT=/run/host-ca.crt
ARG PIP_CERT=""
WORKDIR /src
# LICENSE, LICENSES/: pyproject.toml's license-files, which the wheel carries.
COPY pyproject.toml README.md LICENSE _bpfkit_console.py ./
COPY LICENSES ./LICENSES
COPY bpfkit ./bpfkit
RUN if [ -z "$PIP_CERT" ]; then unset PIP_CERT; fi \
 && python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && touch .venv/.bpfkit-installed
COPY . .
# UAPI headers for the layout test, fetched at build time so the test run needs no network.
RUN scripts/uapi-headers.sh >/dev/null

CMD ["scripts/test.sh"]
