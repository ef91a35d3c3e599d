//go:build invariants

package statetable

// underInvariants is true when cow checks every structure after every
// mutation: allocation and size-heavy tests scale down or skip.
const underInvariants = true
