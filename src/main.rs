fn main() {
    let repo = memprints::pithtrain::Repo::locate(Some(std::path::Path::new(
        &std::env::args().nth(1).unwrap(),
    )))
    .unwrap();
    let params = memprints::params::Params {
        ranks: vec![3, 14],
        detail_layers: vec![0, 1],
        snapshot_dir: "/tmp".into(),
    };
    let model = std::env::args().nth(2).unwrap();
    match memprints::instrument::plan(&repo, &model, &params) {
        Ok(plan) => {
            if let Err(e) = memprints::instrument::check_formatting(&repo, &plan) {
                eprintln!("CHECK: {e}");
            }
            for f in &plan.files {
                let src =
                    memprints::python::PySource::parse(f.rel.clone(), f.updated.clone()).unwrap();
                let back = memprints::remove::strip(&src, &repo.settings);
                if back != f.original {
                    println!(
                        "ROUNDTRIP FAIL {}\n{}",
                        f.rel,
                        memprints::diff::unified(&f.rel, &f.original, &back)
                    );
                } else {
                    println!("ok {}", f.rel);
                }
            }
        }
        Err(e) => eprintln!("ERR: {e}"),
    }
}
