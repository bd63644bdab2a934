//go:build !unix

package upstream

import (
	"os"
	"syscall"
)

// Without process groups, only the child itself is signalled.

func sysProcAttr() *syscall.SysProcAttr { return nil }

func terminateGroup(p *os.Process) error { return p.Signal(os.Interrupt) }

func killGroup(p *os.Process) error { return p.Kill() }
