"""Stop word lists of Elasticsearch's `_<language>_` names and language analyzers: Lucene's lists
(English: Lucene's `EnglishAnalyzer` set; the others: the Snowball project's lists, as Lucene ships
them)."""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ENGLISH = _words(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with"
)

FRENCH = _words(
    "au aux avec ce ces dans de des du elle en et eux il je la le leur lui ma mais me même mes moi "
    "mon ne nos notre nous on ou par pas pour qu que qui sa se ses sur ta te tes toi ton tu un une "
    "vos votre vous c d j l à m n s t y étée étées étant suis es êtes sont serai seras sera serons "
    "serez seront serais serait serions seriez seraient étais était étions étiez étaient fus fut "
    "fûmes fûtes furent sois soit soyons soyez soient fusse fusses fussions fussiez fussent ayant eu "
    "eue eues eus ai avons avez ont aurai aurons aurez auront aurais aurait aurions auriez auraient "
    "avais avait aviez avaient eut eûmes eûtes eurent aie aies ait ayons ayez aient eusse eusses eût "
    "eussions eussiez eussent ceci cela celà cet cette ici ils les leurs quel quels quelle quelles "
    "sans soi"
)

GERMAN = _words(
    "aber alle allem allen aller alles als also am an ander andere anderem anderen anderer anderes "
    "anderm andern anderr anders auch auf aus bei bin bis bist da damit dann der den des dem die das "
    "daß derselbe derselben denselben desselben demselben dieselbe dieselben dasselbe dazu dein deine "
    "deinem deinen deiner deines denn derer dessen dich dir du dies diese diesem diesen dieser dieses "
    "doch dort durch ein eine einem einen einer eines einig einige einigem einigen einiger einiges "
    "einmal er ihn ihm es etwas euer eure eurem euren eurer eures für gegen gewesen hab habe haben "
    "hat hatte hatten hier hin hinter ich mich mir ihr ihre ihrem ihren ihrer ihres euch im in indem "
    "ins ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann kein keine keinem "
    "keinen keiner keines können könnte machen man manche manchem manchen mancher manches mein meine "
    "meinem meinen meiner meines mit muss musste nach nicht nichts noch nun nur ob oder ohne sehr "
    "sein seine seinem seinen seiner seines selbst sich sie ihnen sind so solche solchem solchen "
    "solcher solches soll sollte sondern sonst über um und uns unse unsem unsen unser unses unter "
    "viel vom von vor während war waren warst was weg weil weiter welche welchem welchen welcher "
    "welches wenn werde werden wie wieder will wir wird wirst wo wollen wollte würde würden zu zum "
    "zur zwar zwischen"
)

SPANISH = _words(
    "de la que el en y a los del se las por un para con no una su al lo como más pero sus le ya o "
    "este sí porque esta entre cuando muy sin sobre también me hasta hay donde quien desde todo nos "
    "durante todos uno les ni contra otros ese eso ante ellos e esto mí antes algunos qué unos yo "
    "otro otras otra él tanto esa estos mucho quienes nada muchos cual poco ella estar estas algunas "
    "algo nosotros mi mis tú te ti tu tus ellas nosotras vosotros vosotras os mío mía míos mías tuyo "
    "tuya tuyos tuyas suyo suya suyos suyas nuestro nuestra nuestros nuestras vuestro vuestra "
    "vuestros vuestras esos esas estoy estás está estamos estáis están esté estés estemos estéis "
    "estén estaré estarás estará estaremos estaréis estarán estaría estarías estaríamos estaríais "
    "estarían estaba estabas estábamos estabais estaban estuve estuviste estuvo estuvimos estuvisteis "
    "estuvieron estuviera estuvieras estuviéramos estuvierais estuvieran estuviese estuvieses "
    "estuviésemos estuvieseis estuviesen estando estad he has ha hemos habéis han haya hayas hayamos "
    "hayáis hayan habré habrás habrá habremos habréis habrán habría habrías habríamos habríais "
    "habrían había habías habíamos habíais habían hube hubiste hubo hubimos hubisteis hubieron "
    "hubiera hubieras hubiéramos hubierais hubieran hubiese hubieses hubiésemos hubieseis hubiesen "
    "habiendo habido habida habidos habidas soy eres es somos sois son sea seas seamos seáis sean "
    "seré serás será seremos seréis serán sería serías seríamos seríais serían era eras éramos erais "
    "eran fui fuiste fue fuimos fuisteis fueron fuera fueras fuéramos fuerais fueran fuese fueses "
    "fuésemos fueseis fuesen siendo sido tengo tienes tiene tenemos tenéis tienen tenga tengas "
    "tengamos tengáis tengan tendré tendrás tendrá tendremos tendréis tendrán tendría tendrías "
    "tendríamos tendríais tendrían tenía tenías teníamos teníais tenían tuve tuviste tuvo tuvimos "
    "tuvisteis tuvieron tuviera tuvieras tuviéramos tuvierais tuvieran tuviese tuvieses tuviésemos "
    "tuvieseis tuviesen teniendo tenido tenida tenidos tenidas tened"
)


#: The predefined lists a `stopwords` parameter may name.
NAMED: dict[str, frozenset[str]] = {
    "_english_": ENGLISH,
    "_french_": FRENCH,
    "_german_": GERMAN,
    "_spanish_": SPANISH,
    "_none_": frozenset(),
}
