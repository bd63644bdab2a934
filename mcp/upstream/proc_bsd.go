//go:build unix && !linux

package upstream

import "syscall"

// sysProcAttr puts a stdio child in its own process group, so that it and
// whatever it starts can be signalled together.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
