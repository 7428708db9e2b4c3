//! Wire formats in the smoltcp style: a zero-copy `Packet<T: AsRef<[u8]>>` view with
//! checked constructors, plus a `Repr` with `parse`/`emit`. Malformed bytes are an
//! error value, never a panic.
