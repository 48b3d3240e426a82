//go:build !unix

package client_test

import "time"

// processCPU is unknown here: the per-message CPU metric reads 0.
func processCPU() time.Duration { return 0 }
