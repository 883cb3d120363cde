//! A task that lives only as long as its handle: aborted when the handle is dropped, with the future that held it (a request dropped at an await included) or at the end of the work it served.

use std::future::Future;

/// A spawned task, aborted when this is dropped; or none.
#[derive(Debug, Default)]
pub struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl AbortOnDrop {
    /// `task`, spawned now, aborted with this handle.
    pub fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Some(tokio::spawn(task)))
    }

    /// No task: nothing to abort.
    pub fn none() -> Self {
        Self(None)
    }
}

impl From<tokio::task::JoinHandle<()>> for AbortOnDrop {
    fn from(handle: tokio::task::JoinHandle<()>) -> Self {
        Self(Some(handle))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}
