//! Writes the valid log, segment and manifest of the shared set-up into `fuzz/corpus/<target>/`,
//! the seed corpus of the storage fuzz targets.

use std::path::Path;

fn main() {
    let (fs, files) = kura_fuzz::valid_store();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (suffix, target) in
        [(".log", "log_reader"), (".seg", "segment_reader"), ("MANIFEST", "manifest_reader")]
    {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("create the corpus dir");
        for (i, f) in files.iter().filter(|p| p.to_string_lossy().ends_with(suffix)).enumerate() {
            let bytes = fs.read_file(f).expect("read a region file");
            std::fs::write(dir.join(format!("valid-{i}")), bytes).expect("write a seed");
        }
    }
}
