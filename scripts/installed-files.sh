# shellcheck shell=bash disable=SC2034  # used by scripts/install and scripts/uninstall
# The files scripts/install puts on a host, relative to its root; /etc/appd/appd.conf and the
# state in /var/lib/appd are not here: scripts/uninstall leaves them unless --purge.
installed_files=(
    /usr/bin/appd
    /usr/bin/appctl
    /usr/libexec/appd/appd-exec
    /usr/libexec/appd/appd-oci
    /usr/lib/systemd/system/appd.socket
    /usr/lib/systemd/system/appd.service
    /usr/lib/systemd/system/appd-apps.service
    /usr/lib/tmpfiles.d/appd.conf
    /usr/lib/sysusers.d/appd.conf
    /usr/share/doc/appd/README.md
    /usr/share/doc/appd/api.md
    /usr/share/doc/appd/oci-runtime.md
    /usr/share/doc/appd/oci-image.md
    /usr/share/doc/appd/kubernetes.md
    /usr/share/doc/appd/examples/oci/containerd-appd.toml
    /usr/share/doc/appd/examples/oci/runtimeclass.yaml
    /usr/share/doc/appd/examples/oci/pod.yaml
    /usr/share/doc/appd/examples/oci/containers.conf
    /usr/share/doc/appd/examples/oci/daemon.json
    /usr/share/bash-completion/completions/appd
    /usr/share/bash-completion/completions/appctl
    /usr/share/zsh/vendor-completions/_appd
    /usr/share/zsh/vendor-completions/_appctl
    /usr/share/fish/vendor_completions.d/appd.fish
    /usr/share/fish/vendor_completions.d/appctl.fish
    /usr/share/man/man8/appd.8.gz
    /usr/share/man/man8/appd-oci.8.gz
    /usr/share/man/man1/appctl.1.gz
    /usr/share/man/man5/appd.conf.5.gz
)
