"""Files attached to work orders: kept in GridFS, their type decided from their bytes, photos without metadata."""
