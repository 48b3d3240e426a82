package acl

import "errors"

// ErrInvalidConfig marks a plain_acl.yml (or an update to it) that cannot
// be used; the error names the account or entry and what was wrong.
var ErrInvalidConfig = errors.New("acl: invalid plain_acl.yml")

// ErrNoAccount marks an update or delete for an access key the file does
// not hold.
var ErrNoAccount = errors.New("acl: no such account")

// Denied is a refused request; Reason is the remark sent to the client
// with NO_PERMISSION: it names the account and the resource and
// permission that were missing.
type Denied struct{ Reason string }

func (d *Denied) Error() string { return d.Reason }
