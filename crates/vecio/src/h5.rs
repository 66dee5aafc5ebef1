//! ann-benchmarks style HDF5 files (feature `hdf5`): 2-D datasets `train`, `test`,
//! `neighbors` (and `distances`) at the root.

use std::path::Path;

use crate::{Error, IdMatrix, Result, Vectors};

fn open_2d(path: &Path, name: &str) -> Result<(hdf5::Dataset, usize, usize)> {
    if !path.exists() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
        ));
    }
    let file = hdf5::File::open(path)
        .map_err(|e| Error::format(path, format!("cannot open as HDF5: {e}")))?;
    let ds = file.dataset(name).map_err(|_| {
        let names = file.member_names().unwrap_or_default().join(", ");
        Error::format(
            path,
            format!("no dataset '{name}' (the file has: {names}); pick one with FILE#name"),
        )
    })?;
    let shape = ds.shape();
    if shape.len() != 2 {
        return Err(Error::format(
            path,
            format!("dataset '{name}' has shape {shape:?}; expected a 2-D array (n, dim)"),
        ));
    }
    if shape[1] == 0 {
        return Err(Error::format(
            path,
            format!("dataset '{name}' has dimension 0"),
        ));
    }
    Ok((ds, shape[0], shape[1]))
}

pub(crate) fn read_vectors(path: &Path, name: &str) -> Result<Vectors> {
    let (ds, n, dim) = open_2d(path, name)?;
    let v: Vec<f32> = ds.read_raw().map_err(|e| {
        Error::unsupported(
            path,
            format!("dataset '{name}' cannot be read as float32: {e}"),
        )
    })?;
    if v.len() != n * dim {
        return Err(Error::format(
            path,
            format!(
                "dataset '{name}' returned {} values for shape ({n}, {dim})",
                v.len()
            ),
        ));
    }
    Ok(Vectors::from_vec(v, n, dim))
}

pub(crate) fn read_ids(path: &Path, name: &str) -> Result<IdMatrix> {
    let (ds, n, k) = open_2d(path, name)?;
    let data: Vec<i64> = ds.read_raw().map_err(|e| {
        Error::unsupported(
            path,
            format!("dataset '{name}' cannot be read as integers: {e}"),
        )
    })?;
    if data.len() != n * k {
        return Err(Error::format(
            path,
            format!(
                "dataset '{name}' returned {} values for shape ({n}, {k})",
                data.len()
            ),
        ));
    }
    Ok(IdMatrix { n, k, data })
}
