//go:build !crashfs

package storage

import (
	"os"
	"strings"
)

// defaultFS is what OSFS returns: the real file system. Under the crashfs
// build tag it is a CrashFS instead (crashfs.go).
var defaultFS FS = osFS{}

// PageCacheID identifies the lifetime of the page cache that holds the
// unsynced writes of OSFS: the kernel's boot id, which changes with every
// boot. A file written without sync under an earlier id may have lost
// those writes. "" when unknown. Under the crashfs build tag the page cache
// dies with the process, so the id is the process's (crashfs.go).
func PageCacheID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
