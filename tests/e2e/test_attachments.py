"""A photo attached on the order page in a real browser, held as a phone: picked, uploaded, listed; then a
screenshot pasted onto the page."""

from selenium.webdriver.common.by import By

from tests.attachments.files import phone_jpeg


async def test_a_photo_attached_from_a_phone_sized_window_is_listed_without_its_metadata(
    browser, make_person, make_order, e2e_db, tmp_path
):
    sam = await make_person(name="Sam Rivera")
    order = await make_order(sam, "Broken window")
    photo = tmp_path / "IMG_0042.jpg"
    photo.write_bytes(phone_jpeg((800, 600)))

    phone = browser("sam")
    phone.hold_as_phone()
    phone.log_in(sam)
    phone.open(f"/app/work-orders/{order.id}")
    phone.see("Files")
    pickers = phone.driver.find_elements(By.CSS_SELECTOR, ".q-uploader input[type=file]")
    assert [picker.get_attribute("accept") for picker in pickers][1] == "image/*"  # the camera, on a phone
    pickers[1].send_keys(str(photo))

    phone.see("IMG_0042.jpg")
    phone.see_containing("JPEG image")
    phone.see("attached a file")
    phone.run_js("document.querySelector('.q-uploader').scrollIntoView({block: 'center'})")
    assert phone.sideways_scroll() == 0  # the Files section fits a phone's width
    phone.shoot("photo-attached")

    phone.run_js(PASTE_A_SCREENSHOT)
    phone.see("screenshot.png")
    phone.see_containing("PNG image")
    # listed, so off the uploaders' queues (no row left standing at 100 %)
    phone.wait_until(lambda: phone.texts(".q-uploader__file") == [], "the uploaders' queues to empty")
    stored = await e2e_db["attachments"].find_one({"name": "IMG_0042.jpg"})
    assert stored is not None and stored["contentType"] == "image/jpeg" and stored["size"] < photo.stat().st_size


# What the browser does when a person pastes a screenshot: a paste event whose clipboard holds a PNG file.
PASTE_A_SCREENSHOT = """
const canvas = document.createElement("canvas");
canvas.width = canvas.height = 40;
canvas.getContext("2d").fillRect(0, 0, 40, 40);
canvas.toBlob((blob) => {
  const clipboard = new DataTransfer();
  clipboard.items.add(new File([blob], "screenshot.png", {type: "image/png"}));
  document.dispatchEvent(new ClipboardEvent("paste", {clipboardData: clipboard, bubbles: true}));
});
"""
