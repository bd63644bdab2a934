//go:build unix && !linux

package upstream

import "syscall"

// upSysProcAttr puts a stdio child in its own process group, so that it and
// whatever it starts can be signalled together.
func upSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
