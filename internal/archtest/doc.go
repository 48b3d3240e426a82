// Package archtest holds no code: its test enforces the module's
// dependency rules, so a layer that starts importing a higher one (or the
// SDK that starts pulling in a server) fails the build's tests instead of
// being found by a reader months later.
//
// The rules (DESIGN.md, "Dependency rules"): every package has a layer;
// a package's non-test files import only packages of strictly lower
// layers. Packages of one layer are siblings and never import each other
// (client, broker and namesrv share nothing but the wire vocabulary).
// On top of that, the SDK's whole dependency closure must stay free of
// the servers' libraries.
package archtest
