//go:build !unix

package upstream

import (
	"os"
	"syscall"
)

// Without process groups, only the child itself is signalled.

func upSysProcAttr() *syscall.SysProcAttr { return nil }

func upTerminateGroup(p *os.Process) error { return p.Signal(os.Interrupt) }

func upKillGroup(p *os.Process) error { return p.Kill() }
