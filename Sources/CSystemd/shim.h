// libsystemd for the daemon (never the launcher, which is static: Debian ships no static
// libsystemd). sd_notify(3), sd_listen_fds(3), sd_watchdog_enabled(3), sd_journal_sendv(3).
// sd_journal_send is variadic and cannot be called from Swift: the iovec form is used.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
