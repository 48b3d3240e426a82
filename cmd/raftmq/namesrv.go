package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newNamesrvCmd is a placeholder until the name server lands (owned by the
// name-server work; replaced wholesale). Keep the signature: main.go calls
// it, and g.logger() builds the process logger from --log-level.
func newNamesrvCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "namesrv",
		Short: "Run a name server",
		RunE:  func(*cobra.Command, []string) error { return errors.New("namesrv: not built yet") },
	}
}
