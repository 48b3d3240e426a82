// Package config maps Java-properties files (RocketMQ's broker.conf and
// namesrv.conf) onto Go config structs.
//
// A struct field takes part when it carries a `prop:"keyName"` tag with the
// RocketMQ key name. Struct-typed fields without a tag are walked into, so a
// broker config can embed the store config and both load from one file.
//
// Supported field kinds: string, bool, signed and unsigned integers, floats and
// time.Duration. A Duration accepts either a Go duration ("500ms") or a bare
// integer, read as milliseconds because that is how RocketMQ spells every
// interval key (flushIntervalConsumeQueue=1000).
//
// A file is read as java.util.Properties.load reads it (properties.go);
// a line giving a value with no key is ignored as RocketMQ ignores it,
// and named in the warning.
//
// An unknown or malformed key is a *KeyError naming the key and the file:
// RocketMQ ignores unknown keys, but a misspelt durability setting must not
// pass unnoticed; an unknown key names the closest known one. Every bad key
// of a file is reported in one error (errors.Join), and Explain lists them
// under a count, together with the caller's Validate errors.
//
// A target that implements Ignorer accepts keys it has no field for (a
// RocketMQ key raftmq does not use) with a reason: Load returns them for
// one warning line (Report.Warning), Apply (runtime updates) refuses them,
// and a value that asks for a missing feature is refused either way.
//
// # Files
//
//   - config.go: LoadFile, Load and Apply (the struct walk and parsing),
//     Keys, Print (the effective config in the same syntax), KeyError.
//   - properties.go: ParseProperties and WriteProperties, the Java
//     properties text of conf files, config answers and updates, read as
//     Properties.load reads it (ParseError for what it refuses).
//   - ignored.go: Ignorer, Ignored, Report and its warning, suggestions,
//     Explain and Problems.
//   - netty.go: WithNettyKeys, the one list of RocketMQ's Netty keys both
//     servers accept and ignore.
//   - doctable.go: ClassTable and ReplaceSection, which keep
//     docs/config.md's key tables generated from the code.
package config
