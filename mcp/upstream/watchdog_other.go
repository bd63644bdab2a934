//go:build !linux

package upstream

// Outside Linux there is no group watchdog (see watchdog_linux.go): a stdio
// child's process group ends on Close, and when the bridge is killed the
// child sees its stdin end; what it started in the background may outlive
// the bridge.

type watchdog struct{}

func startWatchdog() (*watchdog, error) { return nil, nil }

func (d *watchdog) watch(int) {}

func (d *watchdog) release() {}
