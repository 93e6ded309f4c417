//! Git's object ids: what GitHub names a blob, a tree or a commit by, computed as git does
//! (SHA-1 over `<kind> <length>\0<content>`).

use sha1::Digest as _;

pub fn git_object_id(kind: &str, content: &[u8]) -> [u8; 20] {
    let mut h = sha1::Sha1::new();
    h.update(format!("{kind} {}\0", content.len()).as_bytes());
    h.update(content);
    h.finalize().into()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A blob's id as git computes it: what GitHub's comparison names a file's content by.
pub fn blob_id(text: &str) -> String {
    hex(&git_object_id("blob", text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_gits() {
        // `git hash-object` of "hello\n".
        assert_eq!(
            hex(&git_object_id("blob", b"hello\n")),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }
}
