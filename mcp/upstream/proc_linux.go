//go:build linux

package upstream

import "syscall"

// sysProcAttr puts a stdio child in its own process group, so that it and
// whatever it starts can be signalled together, and has the kernel kill it
// if the bridge dies without closing it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
