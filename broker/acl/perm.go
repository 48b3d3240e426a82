package acl

import (
	"fmt"
	"strings"
)

// Perm is a permission bit set with RocketMQ's values (acl.common.Permission).
type Perm byte

// Permission bits. DENY wins over everything; a resource needing ANY is
// satisfied by PUB or SUB.
const (
	Deny Perm = 1
	Any  Perm = 1 << 1
	Pub  Perm = 1 << 2
	Sub  Perm = 1 << 3
)

// String names the permission as plain_acl.yml writes it.
func (p Perm) String() string {
	switch {
	case p&Deny != 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	case p&Sub != 0:
		return "SUB"
	case p&Any != 0:
		return "ANY"
	}
	return "DENY"
}

// allows reports whether owned grants needed (Permission.checkPermission).
func (owned Perm) allows(needed Perm) bool {
	if owned&Deny != 0 {
		return false
	}
	if needed&Any != 0 {
		return owned&(Pub|Sub) != 0
	}
	return needed&owned != 0
}

// ParsePerm parses DENY, PUB, SUB, PUB|SUB or SUB|PUB. An empty string is
// DENY, as in RocketMQ (an account without defaultTopicPerm is denied
// every topic it does not list); anything else is an error here where
// RocketMQ silently read it as DENY.
func ParsePerm(s string) (Perm, error) {
	switch strings.TrimSpace(s) {
	case "", "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB":
		return Pub | Sub, nil
	}
	return 0, fmt.Errorf("permission %q: want DENY, PUB, SUB or PUB|SUB", s)
}
