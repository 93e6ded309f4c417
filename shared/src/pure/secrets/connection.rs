//! Connection strings: `Server=…;User Id=…;Password=…`, Azure's
//! `DefaultEndpointsProtocol=https;AccountName=…;AccountKey=…`, Service Bus's
//! `SharedAccessKey=…`, and a shared access signature's `sig=` in a URL's query. The fields
//! are `name=value` pairs separated by `;` (ADO.NET, ODBC, Azure) or by `?`/`&` (a URL's query,
//! JDBC's `?user=…&password=…`); names compare without case, as the drivers read them.

/// The fields that carry a key or a password, and the kind each is named by.
const FIELDS: &[(&str, &str)] = &[
    ("password", "its value is a connection string with a `Password=` field"),
    ("pwd", "its value is a connection string with a `Pwd=` field"),
    (
        "accountkey",
        "its value is a connection string with an `AccountKey=` field",
    ),
    (
        "sharedaccesskey",
        "its value is a connection string with a `SharedAccessKey=` field",
    ),
    (
        "sharedaccesssignature",
        "its value is a connection string with a `SharedAccessSignature=` field",
    ),
    (
        "sig",
        "its value carries a `sig=` signature (a shared access signature grants access by itself)",
    ),
];

pub(super) fn secret(value: &str) -> Option<&'static str> {
    value.split([';', '&', '?']).find_map(|part| {
        let (name, v) = part.split_once('=')?;
        let name = name.trim().to_ascii_lowercase();
        // A quoted or braced empty value (`Password="";`, ODBC's `PWD={}`) holds nothing.
        let v = v.trim().trim_matches(['"', '\'', '{', '}']);
        if v.is_empty() {
            return None;
        }
        FIELDS.iter().find(|(n, _)| *n == name).map(|(_, why)| *why)
    })
}
