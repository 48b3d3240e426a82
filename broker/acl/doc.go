// Package acl is RocketMQ 4.9's plain ACL for the broker: the rules of a
// plain_acl.yml, checked against each request. It knows nothing of the
// remoting protocol: the broker describes a request (code, client address,
// access key, a signature check, whether it needs an admin account, the
// topics and groups it touches with the permission each needs) and Check
// answers nil or a *Denied whose Reason becomes the NO_PERMISSION remark.
//
// Check follows PlainPermissionManager.validate: a global white address
// passes; an unknown or missing access key is refused; the account's own
// white address passes without a signature; otherwise the signature
// (remoting.VerifySignature, HmacSHA1 of RocketMQ's clients) must verify;
// an admin-only code needs an admin account; each resource's permission
// comes from the account's topicPerms/groupPerms (groups as their
// %RETRY% topics) or its default for topics or groups, DENY when unset.
//
// # Files
//
//   - config.go: File (the YAML), Compile into Rules, Check, Resource.
//   - perm.go: Perm (DENY, ANY, PUB, SUB with RocketMQ's bit values).
//   - addr.go: white address patterns (exact, lists, {a,b}, *, ranges).
//   - store.go: Store, the file behind the rules: Open, the mtime/size
//     poller (Watch), and the rewrites of the ACL admin commands (Update,
//     Delete, SetGlobalWhite) that bump dataVersion.
//   - errors.go: ErrInvalidConfig, ErrNoAccount, Denied.
//
// Deviations from RocketMQ, on purpose: one file per broker (not the
// conf/acl directory); a file that names an unknown key, a permission
// other than DENY/PUB/SUB/PUB|SUB or a malformed address is refused
// (RocketMQ reads unknown permissions as DENY and ignores unknown keys),
// and the last good rules stay in force.
package acl
