//go:build unix

package upstream

import (
	"os"
	"syscall"
)

// upTerminateGroup sends SIGTERM to the process group p leads.
func upTerminateGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGTERM)
}

// upKillGroup sends SIGKILL to the process group p leads.
func upKillGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}
