//go:build unix

package upstream

import (
	"os"
	"syscall"
)

// terminateGroup sends SIGTERM to the process group p leads.
func terminateGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGTERM)
}

// killGroup sends SIGKILL to the process group p leads.
func killGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}
