//! The embedded backend: [`Kura`] (this crate's regions over `kura-storage`) behind the
//! [`kura_backend::Backend`] interface the HTTP layer uses.
//!
//! Every method forwards to the handle's own; the only work done here is none, so that the
//! embedded backend answers exactly as the handle does, at the handle's speed.

use crate::client::Kura;
use crate::error::Result;
use kura_backend::{
    AlterMode, Append, Backend, BackendKind, Cell, CheckAndMutate, Increment, ReadSpec, RegionInfo,
    Row, RowFilter, RowMutation, ScanPage, ScanRequest, TableDescriptor,
};
use std::sync::Arc;

#[async_trait::async_trait]
impl Backend for Kura {
    fn kind(&self) -> BackendKind {
        BackendKind::Embedded
    }

    fn location(&self) -> String {
        self.config().data_dir.display().to_string()
    }

    fn default_regions(&self) -> u32 {
        self.config().default_regions
    }

    async fn list_tables(&self) -> Result<Vec<TableDescriptor>> {
        Ok(Kura::list_tables(self))
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<TableDescriptor>>> {
        Ok(Kura::table(self, name))
    }

    async fn create_table(&self, desc: TableDescriptor) -> Result<()> {
        Kura::create_table(self, desc).await
    }

    async fn alter_table(&self, desc: TableDescriptor, mode: AlterMode) -> Result<TableDescriptor> {
        Kura::alter_table(self, desc, mode).await
    }

    async fn drop_table(&self, name: &str) -> Result<()> {
        Kura::drop_table(self, name).await
    }

    async fn get(
        &self,
        table: &str,
        row: &[u8],
        read: &ReadSpec,
        filter: Option<Arc<dyn RowFilter>>,
    ) -> Result<Option<Row>> {
        Kura::get_filtered(self, table, row, read, filter).await
    }

    async fn multi_get(
        &self,
        table: &str,
        rows: Vec<Vec<u8>>,
        read: &ReadSpec,
    ) -> Result<Vec<Option<Row>>> {
        Kura::multi_get(self, table, rows, read).await
    }

    async fn scan(&self, table: &str, req: ScanRequest) -> Result<ScanPage> {
        Kura::scan(self, table, req).await
    }

    async fn mutate_rows(&self, table: &str, ms: Vec<RowMutation>) -> Result<()> {
        Kura::mutate_rows(self, table, ms).await
    }

    async fn increment(
        &self,
        table: &str,
        inc: Increment,
        key: Option<Vec<u8>>,
    ) -> Result<Vec<Cell>> {
        Kura::increment_keyed(self, table, inc, key).await
    }

    async fn append(&self, table: &str, app: Append, key: Option<Vec<u8>>) -> Result<Vec<Cell>> {
        Kura::append_keyed(self, table, app, key).await
    }

    async fn check_and_mutate(
        &self,
        table: &str,
        cam: CheckAndMutate,
        key: Option<Vec<u8>>,
    ) -> Result<bool> {
        Kura::check_and_mutate_keyed(self, table, cam, key).await
    }

    async fn flush(&self, table: &str) -> Result<()> {
        Kura::flush(self, table).await
    }

    async fn compact(&self, table: &str, major: bool) -> Result<()> {
        Kura::compact(self, table, major).await
    }

    async fn split_region(
        &self,
        table: &str,
        region: u64,
        at_bucket: Option<u32>,
    ) -> Result<(u64, u64)> {
        // The edge: operators name regions and buckets by number.
        let at_bucket = at_bucket.map(crate::SaltBucket::new);
        let (old, new) =
            Kura::split_region(self, table, crate::RegionId::new(region), at_bucket).await?;
        Ok((old.get(), new.get()))
    }

    async fn regions(&self, table: &str) -> Result<Vec<RegionInfo>> {
        Kura::regions(self, table).await
    }

    fn bucket_activity(&self, table: &str) -> Option<Vec<(u64, u64)>> {
        Kura::bucket_activity(self, table)
    }

    async fn checkpoint(&self, dest: &std::path::Path) -> Result<kura_backend::CheckpointInfo> {
        Kura::checkpoint(self, dest).await
    }

    async fn shutdown(&self) -> Result<()> {
        Kura::shutdown(self).await
    }
}

impl From<Kura> for kura_backend::Store {
    fn from(kura: Kura) -> Self {
        kura_backend::Store::new(Arc::new(kura))
    }
}
