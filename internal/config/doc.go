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
// An unknown or malformed key is a *KeyError naming the key and the file:
// RocketMQ ignores unknown keys, but a misspelt durability setting must not
// pass unnoticed.
//
// # Files
//
//   - config.go: LoadFile and Apply (the struct walk and parsing), Keys,
//     Print (the effective config in the same syntax), KeyError.
package config
