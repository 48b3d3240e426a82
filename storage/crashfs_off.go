//go:build !crashfs

package storage

// defaultFS is what OSFS returns: the real file system. Under the crashfs
// build tag it is a CrashFS instead (crashfs.go).
var defaultFS FS = osFS{}
