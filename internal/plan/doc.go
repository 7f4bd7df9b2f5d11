// Package plan turns a cluster snapshot and a request into the list of changes to make.
// Planning is pure: no I/O, deterministic (the same snapshot and request give the same plan,
// in the same order), so it is tested with tables and golden files and a dry run can show
// exactly what would be done.
package plan
