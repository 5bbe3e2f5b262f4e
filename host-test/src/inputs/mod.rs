//! Everything read from the user's inputs: files and folders (`files`), documents and objects
//! (`manifests`), the Namespaces and Services among them, and where a field sits in its file.

pub mod files;
pub mod manifests;
#[cfg(feature = "commands")]
pub mod namespaces;
#[cfg(feature = "commands")]
pub mod services;
#[cfg(feature = "commands")]
pub mod source_location;
